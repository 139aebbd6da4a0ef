#include "path.h"
