// torch's generator and randperm are header-only templates (torch_random.h); this unit keeps
// the build list one file per concept.
#include "model/torch_random.h"
