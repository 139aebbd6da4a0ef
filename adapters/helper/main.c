#include "helper.h"
int main(void) { return 2; }
