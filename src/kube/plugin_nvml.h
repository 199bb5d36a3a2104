/* NVML as the standalone plugin's inventory source (see plugin_nvml.c). */
#ifndef GS_PLUGIN_NVML_H
#define GS_PLUGIN_NVML_H

#include "error.h"
#include "inventory.h"

struct plugin_nvml;

/* Load libnvidia-ml.so.1 from dir (NULL: the system's) and initialise it.
 * 0, or a negative errno with *err naming the library or the failing call. */
int plugin_nvml_open(const char *dir, struct plugin_nvml **ret, struct gs_error **err);
/* Shut NVML down and unload it; NULL-safe. */
void plugin_nvml_close(struct plugin_nvml *n);
/* kube_options.read_inventory over NVML; ctx is the struct plugin_nvml.
 * A GPU failing any query is unhealthy (keeping its last known uuid). */
int plugin_nvml_inventory(void *ctx, struct gs_inventory *inv, struct gs_error **err);

#endif /* GS_PLUGIN_NVML_H */
