// numpy's legacy RandomState is header-only (numpy_random.h); this unit keeps the build list
// one file per concept.
#include "model/numpy_random.h"
