/* registry.h -- every device this build knows, by the name a user gives
 * it ("cpu", "cuda", "cuda:1"): the one place that names each backend
 * (backend/cpu/, backend/cuda/ or its stand-in), above them all, so that
 * the table (backend/backend.h) and the backends below it know none of
 * the others. The layers above ask it for a device's table and for the
 * host's. Internal: not API; ts_device_check, ts_device_describe and
 * ts_gpus_describe (tensorscope.h) are its public side. */
#ifndef TS_BACKEND_REGISTRY_H
#define TS_BACKEND_REGISTRY_H

#include "backend/backend.h"

/* The backend a device string names: "cpu", "cuda", "cuda:N" (and
 * "cpu-staged", for tests); anything else TS_ERR_INVALID_ARGUMENT listing
 * the choices. */
ts_status ts_backend_for(const char *device, const ts_backend **out);

/* The table of the host's memory (the CPU's), for the layers above the
 * backends: a NaN/Inf scan of a value the host holds, on any device. */
const ts_backend *ts_backend_host(void);

#endif
