#include "adapter.h"
