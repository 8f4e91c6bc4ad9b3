/* graph_dump.h -- the graph as text or Graphviz DOT: ts_graph_dump's work
 * (model/exports.c hands it what it reads of the model). Internal. */
#ifndef TS_DIAG_GRAPH_DUMP_H
#define TS_DIAG_GRAPH_DUMP_H

#include "diag/backward_ops.h"

/* m: what it reads of the model (its prog NULL before a compile), NULL
 * without a model; the errors are ts_graph_dump's. */
char *ts_graph_dump_of(const ts_graph *g, const ts_bwd_model *m, ts_dump_format fmt, int flags);

#endif
