/* Compiles the public header alone as strict C11 (-std=c11 -pedantic-errors). */
#include "cortiq.h"

int cq_header_check_dummy(void);
int cq_header_check_dummy(void) { return CQ_OK; }
