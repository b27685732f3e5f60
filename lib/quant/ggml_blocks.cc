#include "lib/quant/ggml_blocks.h"
