#include "lib/tokenizer/tokenizer.h"
