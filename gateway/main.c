#include "../adapters/adapter.h"
int main(void) { return 0; }
