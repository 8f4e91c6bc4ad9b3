/* onnx_model.h -- ONNX models written by a test: protobuf-c over the
 * project's ONNX schema subset, built in memory node by node (an arena
 * freed when the model is written), then written into `dir` and imported.
 * Included by the ONNX importer's tests; everything here is static. */
#ifndef TS_TEST_ONNX_MODEL_H
#define TS_TEST_ONNX_MODEL_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "onnx.pb-c.h"
#include "tensorscope.h"

typedef TensorscopeOnnx__NodeProto Node;
typedef TensorscopeOnnx__TensorProto Tensor;
typedef TensorscopeOnnx__AttributeProto Attr;

/* ------------------------------------------------ a model, built in memory */

static void *arena[4096];
static int n_arena;

static inline void *mem(size_t n) {
    void *p = calloc(1, n ? n : 1);
    if (!p || n_arena == (int)(sizeof arena / sizeof *arena)) abort();
    arena[n_arena++] = p;
    return p;
}
static inline char *str(const char *s) { return strcpy(mem(strlen(s) + 1), s); }
static inline void mem_free(void) {
    while (n_arena) free(arena[--n_arena]);
}

/* Appends p to the array *v of *n pointers (arena-grown). */
static inline void push(void ***v, size_t *n, void *p) {
    void **w = mem((*n + 1) * sizeof *w);
    if (*n) memcpy(w, *v, *n * sizeof *w);
    w[(*n)++] = p;
    *v = w;
}

static TensorscopeOnnx__GraphProto *graph;

static inline void model_begin(void) {
    graph = mem(sizeof *graph);
    *graph = (TensorscopeOnnx__GraphProto)TENSORSCOPE_ONNX__GRAPH_PROTO__INIT;
}

static inline TensorscopeOnnx__ValueInfoProto *value_info(const char *name, int ndim, const int64_t *dims) {
    TensorscopeOnnx__ValueInfoProto *vi = mem(sizeof *vi);
    *vi = (TensorscopeOnnx__ValueInfoProto)TENSORSCOPE_ONNX__VALUE_INFO_PROTO__INIT;
    vi->name = str(name);
    if (ndim < 0) return vi;
    TensorscopeOnnx__TensorShapeProto *shape = mem(sizeof *shape);
    *shape = (TensorscopeOnnx__TensorShapeProto)TENSORSCOPE_ONNX__TENSOR_SHAPE_PROTO__INIT;
    for (int i = 0; i < ndim; i++) {
        TensorscopeOnnx__TensorShapeProto__Dimension *d = mem(sizeof *d);
        *d = (TensorscopeOnnx__TensorShapeProto__Dimension)TENSORSCOPE_ONNX__TENSOR_SHAPE_PROTO__DIMENSION__INIT;
        if (dims[i] >= 0) {
            d->has_dim_value = 1;
            d->dim_value = dims[i];
        } else { /* a dynamic dimension with a name of -dims[i] characters */
            d->dim_param = memset(mem((size_t)-dims[i] + 1), 'b', (size_t)-dims[i]);
        }
        push((void ***)&shape->dim, &shape->n_dim, d);
    }
    TensorscopeOnnx__TypeProto__Tensor *tt = mem(sizeof *tt);
    *tt = (TensorscopeOnnx__TypeProto__Tensor)TENSORSCOPE_ONNX__TYPE_PROTO__TENSOR__INIT;
    tt->has_elem_type = 1;
    tt->elem_type = 1; /* float */
    tt->shape = shape;
    TensorscopeOnnx__TypeProto *type = mem(sizeof *type);
    *type = (TensorscopeOnnx__TypeProto)TENSORSCOPE_ONNX__TYPE_PROTO__INIT;
    type->tensor_type = tt;
    vi->type = type;
    return vi;
}

typedef TensorscopeOnnx__StringStringEntryProto Prop;

/* Appends key: value to the metadata_props *props of *n entries (a
 * graph's, a node's, a value_info's). */
static inline void prop(Prop ***props, size_t *n, const char *key, const char *value) {
    Prop *e = mem(sizeof *e);
    *e = (Prop)TENSORSCOPE_ONNX__STRING_STRING_ENTRY_PROTO__INIT;
    e->key = str(key);
    e->value = str(value);
    push((void ***)props, n, e);
}

/* A value_info for `name` that says only key: value in its metadata_props
 * (what the dynamo exporter writes of an initializer). */
static inline void value_meta(const char *name, const char *key, const char *value) {
    TensorscopeOnnx__ValueInfoProto *vi = value_info(name, -1, NULL);
    prop(&vi->metadata_props, &vi->n_metadata_props, key, value);
    push((void ***)&graph->value_info, &graph->n_value_info, vi);
}

static inline void input(const char *name, int ndim, const int64_t *dims) {
    push((void ***)&graph->input, &graph->n_input, value_info(name, ndim, dims));
}
static inline void output(const char *name) { push((void ***)&graph->output, &graph->n_output, value_info(name, -1, NULL)); }
/* An input or output of ONNX type `elem` (TensorProto.DataType: 7 int64, 3 int8, ...). */
static inline TensorscopeOnnx__ValueInfoProto *typed_info(const char *name, int elem, int ndim, const int64_t *dims) {
    TensorscopeOnnx__ValueInfoProto *vi = value_info(name, ndim, dims);
    vi->type->tensor_type->elem_type = elem;
    return vi;
}
static inline void input_typed(const char *name, int elem, int ndim, const int64_t *dims) {
    push((void ***)&graph->input, &graph->n_input, typed_info(name, elem, ndim, dims));
}
static inline void output_typed(const char *name, int elem, int ndim, const int64_t *dims) {
    push((void ***)&graph->output, &graph->n_output, typed_info(name, elem, ndim, dims));
}

/* A node; ins and outs are comma-separated names ("" for an omitted input). */
static inline Node *node(const char *op, const char *name, const char *ins, const char *outs) {
    Node *n = mem(sizeof *n);
    *n = (Node)TENSORSCOPE_ONNX__NODE_PROTO__INIT;
    n->op_type = str(op);
    n->name = str(name);
    for (int k = 0; k < 2; k++) {
        char *list = str(k ? outs : ins);
        for (char *p = list, *e; *p; p = e) {
            e = strchr(p, ',');
            if (e) *e++ = '\0';
            else e = p + strlen(p);
            push((void ***)(k ? &n->output : &n->input), k ? &n->n_output : &n->n_input, p);
        }
    }
    push((void ***)&graph->node, &graph->n_node, n);
    return n;
}

static inline Attr *attr(Node *n, const char *name) {
    Attr *a = mem(sizeof *a);
    *a = (Attr)TENSORSCOPE_ONNX__ATTRIBUTE_PROTO__INIT;
    a->name = str(name);
    push((void ***)&n->attribute, &n->n_attribute, a);
    return a;
}
static inline void attr_int(Node *n, const char *name, int64_t v) {
    Attr *a = attr(n, name);
    a->has_i = 1;
    a->i = v;
}
static inline void attr_float(Node *n, const char *name, float v) {
    Attr *a = attr(n, name);
    a->has_type = 1;
    a->type = TENSORSCOPE_ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
    a->has_f = 1;
    a->f = v;
}
static inline void attr_ints(Node *n, const char *name, int count, const int64_t *v) {
    Attr *a = attr(n, name);
    a->ints = mem((size_t)count * sizeof *v);
    memcpy(a->ints, v, (size_t)count * sizeof *v);
    a->n_ints = (size_t)count;
}

static inline void attr_string(Node *n, const char *name, const char *v) {
    Attr *a = attr(n, name);
    a->has_s = 1;
    a->s.len = strlen(v);
    a->s.data = (uint8_t *)str(v);
}

static inline Tensor *tensor(const char *name, int dtype, int ndim, const int64_t *dims) {
    Tensor *t = mem(sizeof *t);
    *t = (Tensor)TENSORSCOPE_ONNX__TENSOR_PROTO__INIT;
    t->name = str(name);
    t->has_data_type = 1;
    t->data_type = dtype;
    t->dims = mem((size_t)(ndim ? ndim : 1) * sizeof *dims);
    if (ndim) memcpy(t->dims, dims, (size_t)ndim * sizeof *dims);
    t->n_dims = (size_t)ndim;
    return t;
}
/* An int64 initializer [n] holding v. */
static inline Tensor *init_i64(const char *name, int n, const int64_t *v) {
    Tensor *t = tensor(name, 7, 1, (int64_t[]){n});
    t->int64_data = mem((size_t)n * sizeof *v);
    memcpy(t->int64_data, v, (size_t)n * sizeof *v);
    t->n_int64_data = (size_t)n;
    push((void ***)&graph->initializer, &graph->n_initializer, t);
    return t;
}
static inline Tensor *init_f32(const char *name, int ndim, const int64_t *dims, const float *v) {
    Tensor *t = tensor(name, 1, ndim, dims);
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= dims[i];
    t->float_data = mem((size_t)n * sizeof *v);
    memcpy(t->float_data, v, (size_t)n * sizeof *v);
    t->n_float_data = (size_t)n;
    push((void ***)&graph->initializer, &graph->n_initializer, t);
    return t;
}
/* An initializer whose data is external: location, offset (NULL: none). */
static inline Tensor *init_external(const char *name, int dtype, int ndim, const int64_t *dims, const char *location, const char *offset) {
    Tensor *t = tensor(name, dtype, ndim, dims);
    t->has_data_location = 1;
    t->data_location = TENSORSCOPE_ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    const char *keys[2] = {"location", "offset"}, *vals[2] = {location, offset};
    for (int k = 0; k < 2 && vals[k]; k++) {
        TensorscopeOnnx__StringStringEntryProto *e = mem(sizeof *e);
        *e = (TensorscopeOnnx__StringStringEntryProto)TENSORSCOPE_ONNX__STRING_STRING_ENTRY_PROTO__INIT;
        e->key = str(keys[k]);
        e->value = str(vals[k]);
        push((void ***)&t->external_data, &t->n_external_data, e);
    }
    push((void ***)&graph->initializer, &graph->n_initializer, t);
    return t;
}

static char dir[64];
/* The default domain's opset of the models written (import_as); a
 * negative one writes no opset_import. */
static int64_t model_opset = 17;

/* Writes the model as dir/NAME.onnx and imports it; *out keeps the graph
 * when asked (else it is freed). The model's memory is released. */
static inline ts_status import_as(const char *name, ts_graph **out) {
    TensorscopeOnnx__OperatorSetIdProto opset = TENSORSCOPE_ONNX__OPERATOR_SET_ID_PROTO__INIT;
    opset.has_version = 1;
    opset.version = model_opset;
    TensorscopeOnnx__OperatorSetIdProto *opsets[1] = {&opset};
    TensorscopeOnnx__ModelProto model = TENSORSCOPE_ONNX__MODEL_PROTO__INIT;
    model.n_opset_import = model_opset < 0 ? 0 : 1;
    model.opset_import = opsets;
    model.graph = graph;
    size_t size = tensorscope_onnx__model_proto__get_packed_size(&model);
    uint8_t *packed = malloc(size);
    tensorscope_onnx__model_proto__pack(&model, packed);
    char path[256];
    snprintf(path, sizeof path, "%s/%s.onnx", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(packed, 1, size, f) != size || fclose(f) != 0) abort();
    free(packed);
    mem_free();
    ts_graph *g = NULL;
    ts_status st = ts_graph_from_onnx(&g, path, NULL, 0);
    if (st != TS_OK && g) {
        printf("FAIL a graph after an error\n");
        abort();
    }
    if (out) *out = g;
    else ts_graph_free(g);
    return st;
}

/* Removes dir and the models written into it. */
static inline void remove_dir(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) printf("could not remove %s\n", dir);
}

static inline void expect(const char *what, ts_status got, ts_status want, const char *needle) {
    const char *msg = got ? ts_last_error() : "(imported)";
    CHECK(got == want && (!needle || strstr(msg, needle)), "%s: %s with '%s': %s", what, ts_status_name(want), needle ? needle : "",
          msg);
}

static inline void write_file(const char *name, const void *b, size_t n) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(b, 1, n, f) != n || fclose(f) != 0) abort();
}

#endif
