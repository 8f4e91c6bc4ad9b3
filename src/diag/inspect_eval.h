/* inspect_eval.h -- the inspector's `eval` (diag/inspect_eval.c): numpy-style
 * expressions over tensors by name, the public ts_eval (under
 * ts_model_held_eval, model/retrieve.c). Its limits, which the tests
 * reach. */
#ifndef TS_INSPECT_EVAL_H
#define TS_INSPECT_EVAL_H

/* values a result or any step of an expression may have (an outer product
 * by broadcasting grows fast): 2^26 floats, 256 MiB */
#define TS_EVAL_MAX_VALUES ((int64_t)1 << 26)
/* nesting of parentheses, calls and unary operators */
#define TS_EVAL_MAX_DEPTH 64
/* an expression's length */
#define TS_EVAL_MAX_CHARS 4096

#endif
