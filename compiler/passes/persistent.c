/* persistent.c - persistent programs (placeholder until the pass lands). */
#include "passes.h"

void pass_persistent(struct pass_ctx *pc) { (void)pc; }
