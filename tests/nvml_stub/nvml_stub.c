/* A stand-in for libnvidia-ml.so.1 (issue 34): the real nvidia-ml-py loads it by that name and calls
 * it as it calls a driver's library, marshalling every argument and struct itself.
 *
 * Built at test time with gcc against NVIDIA's own nvml.h (the nvidia-nvml-dev wheel), with
 * -Wmissing-prototypes: every function below has the signature the header declares, under the name
 * the header gives it (nvml.h maps nvmlInit to nvmlInit_v2, nvmlDeviceGetCount to _v2, ...), and a
 * name the header does not declare is an error.  tests/nvml_stand_in.py builds it and writes its
 * state; a build that hides some names (a linker version script) is an older driver's library.
 *
 * The state is a file named by $NVML_STUB_STATE, read by nvmlInitWithFlags: `key=value` lines.
 *   init=N              nvmlInitWithFlags returns N (9: NVML_ERROR_DRIVER_NOT_LOADED)
 *   fail.FUNCTION=N     FUNCTION (the exported name) returns N
 *   driver, nvml, cuda, count, pname.PID    the system's facts
 *   I.KEY               device I's facts; a KEY absent answers NVML_ERROR_NOT_SUPPORTED
 * $NVML_STUB_LOG, where set, gets the name of each function called, one a line.
 * Its NVML version begins "stand-in": facts read through it cannot pass for a real driver's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvml.h"

#define MAX_KEYS 512
#define LINE 400
#define MAX_DEVICES 8
#define MAX_MIG 7 /* MIG devices per GPU at most (A100 and H100: 7, NVIDIA's MIG user guide) */

struct nvmlDevice_st {
    unsigned int index;
};

static struct nvmlDevice_st devices[MAX_DEVICES], migs[MAX_DEVICES][MAX_MIG];
static char keys[MAX_KEYS][LINE], values[MAX_KEYS][LINE];
static int nkeys, inits;

struct named {
    const char *name;
    unsigned long long value;
};
static const struct named FEATURE[] = {
    {"Disabled", NVML_FEATURE_DISABLED}, {"Enabled", NVML_FEATURE_ENABLED}, {"No", 0}, {"Yes", 1}, {0, 0}};
static const struct named COMPUTE_MODE[] = {{"Default", NVML_COMPUTEMODE_DEFAULT},
                                            {"Exclusive_Thread", NVML_COMPUTEMODE_EXCLUSIVE_THREAD},
                                            {"Prohibited", NVML_COMPUTEMODE_PROHIBITED},
                                            {"Exclusive_Process", NVML_COMPUTEMODE_EXCLUSIVE_PROCESS},
                                            {0, 0}};
static const struct named FABRIC_STATE[] = {{"Not Started", NVML_GPU_FABRIC_STATE_NOT_STARTED},
                                            {"In Progress", NVML_GPU_FABRIC_STATE_IN_PROGRESS},
                                            {"Completed", NVML_GPU_FABRIC_STATE_COMPLETED},
                                            {0, 0}};
/* nvidia-smi's element names (clocks_event_reason_NAME) -> the header's bits */
static const struct named REASON[] = {{"gpu_idle", nvmlClocksEventReasonGpuIdle},
                                      {"applications_clocks_setting", nvmlClocksEventReasonApplicationsClocksSetting},
                                      {"sw_power_cap", nvmlClocksEventReasonSwPowerCap},
                                      {"hw_slowdown", nvmlClocksThrottleReasonHwSlowdown},
                                      {"sync_boost", nvmlClocksEventReasonSyncBoost},
                                      {"sw_thermal_slowdown", nvmlClocksEventReasonSwThermalSlowdown},
                                      {"hw_thermal_slowdown", nvmlClocksThrottleReasonHwThermalSlowdown},
                                      {"hw_power_brake_slowdown", nvmlClocksThrottleReasonHwPowerBrakeSlowdown},
                                      {"display_clocks_setting", nvmlClocksEventReasonDisplayClockSetting},
                                      {0, 0}};

static const char *lookup(const char *key) {
    for (int i = 0; i < nkeys; i++)
        if (strcmp(keys[i], key) == 0) return values[i];
    return NULL;
}

static const char *device_value(nvmlDevice_t d, const char *key) {
    char full[80];
    snprintf(full, sizeof full, "%u.%s", d->index, key);
    return lookup(full);
}

/* each call's name, one a line, to $NVML_STUB_LOG: which entry points a test exercised */
static void logged(const char *fn) {
    const char *path = getenv("NVML_STUB_LOG");
    FILE *out = path ? fopen(path, "a") : NULL;
    if (!out) return;
    fprintf(out, "%s\n", fn);
    fclose(out);
}

/* NVML_SUCCESS, or what the state makes `fn` return (uninitialised: NVML_ERROR_UNINITIALIZED) */
static nvmlReturn_t enter(const char *fn) {
    char key[96];
    logged(fn);
    if (inits == 0) return NVML_ERROR_UNINITIALIZED;
    snprintf(key, sizeof key, "fail.%s", fn);
    const char *code = lookup(key);
    return code ? (nvmlReturn_t)atoi(code) : NVML_SUCCESS;
}
#define ENTER()                                     \
    do {                                            \
        nvmlReturn_t entered_ = enter(__func__);    \
        if (entered_ != NVML_SUCCESS) return entered_; \
    } while (0)

static nvmlReturn_t text(const char *v, char *out, unsigned int length) {
    if (!v) return NVML_ERROR_NOT_SUPPORTED;
    if (strlen(v) >= length) return NVML_ERROR_INSUFFICIENT_SIZE;
    strcpy(out, v);
    return NVML_SUCCESS;
}

static nvmlReturn_t number(nvmlDevice_t d, const char *key, unsigned long long *out) {
    const char *v = device_value(d, key);
    if (!v) return NVML_ERROR_NOT_SUPPORTED;
    *out = strtoull(v, NULL, 0);
    return NVML_SUCCESS;
}

static nvmlReturn_t uint_value(nvmlDevice_t d, const char *key, unsigned int *out) {
    unsigned long long n = 0;
    nvmlReturn_t rc = number(d, key, &n);
    if (rc == NVML_SUCCESS) *out = (unsigned int)n;
    return rc;
}

static nvmlReturn_t by_name(nvmlDevice_t d, const char *key, const struct named *names, unsigned int *out) {
    const char *v = device_value(d, key);
    if (!v) return NVML_ERROR_NOT_SUPPORTED;
    for (; names->name; names++)
        if (strcmp(names->name, v) == 0) {
            *out = (unsigned int)names->value;
            return NVML_SUCCESS;
        }
    return NVML_ERROR_UNKNOWN;
}

/* ---- system ---------------------------------------------------------------------------------- */

nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    const char *path = getenv("NVML_STUB_STATE");
    char line[LINE];
    FILE *f = path ? fopen(path, "r") : NULL;
    logged(__func__);
    if (!f) return NVML_ERROR_DRIVER_NOT_LOADED; /* as on a machine without the driver */
    for (nkeys = 0; nkeys < MAX_KEYS && fgets(line, sizeof line, f);) {
        char *eq = strchr(line, '=');
        if (line[0] == '#' || !eq) continue;
        *eq = '\0';
        eq[strcspn(eq + 1, "\n") + 1] = '\0';
        snprintf(keys[nkeys], sizeof keys[0], "%s", line);
        snprintf(values[nkeys], sizeof values[0], "%s", eq + 1);
        nkeys++;
    }
    fclose(f);
    const char *init = lookup("init");
    if (init && atoi(init) != 0) return (nvmlReturn_t)atoi(init);
    for (unsigned int i = 0; i < MAX_DEVICES; i++) {
        devices[i].index = i;
        for (unsigned int m = 0; m < MAX_MIG; m++) migs[i][m].index = i;
    }
    inits++;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlInit(void) { return nvmlInitWithFlags(0); }

nvmlReturn_t nvmlShutdown(void) {
    ENTER();
    inits--;
    return NVML_SUCCESS;
}

const char *nvmlErrorString(nvmlReturn_t result) {
    logged(__func__);
    switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument Version Mismatch";
    default: return "Unknown Error";
    }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    ENTER();
    return text(lookup("driver"), version, length);
}

nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length) {
    char marked[NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE];
    ENTER();
    if (!lookup("nvml")) return NVML_ERROR_NOT_SUPPORTED;
    snprintf(marked, sizeof marked, "stand-in %s", lookup("nvml"));
    return text(marked, version, length);
}

static nvmlReturn_t cuda_version(int *version) {
    if (!lookup("cuda")) return NVML_ERROR_NOT_SUPPORTED;
    *version = atoi(lookup("cuda"));
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *cudaDriverVersion) {
    ENTER();
    return cuda_version(cudaDriverVersion);
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *cudaDriverVersion) {
    ENTER();
    return cuda_version(cudaDriverVersion);
}

nvmlReturn_t nvmlSystemGetProcessName(unsigned int pid, char *name, unsigned int length) {
    char key[32];
    ENTER();
    snprintf(key, sizeof key, "pname.%u", pid);
    return lookup(key) ? text(lookup(key), name, length) : NVML_ERROR_NOT_FOUND;
}

static unsigned int device_count(void) { return lookup("count") ? (unsigned int)atoi(lookup("count")) : 0; }

nvmlReturn_t nvmlDeviceGetCount(unsigned int *deviceCount) {
    ENTER();
    *deviceCount = device_count();
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device) {
    ENTER();
    if (index >= device_count() || index >= MAX_DEVICES) return NVML_ERROR_INVALID_ARGUMENT;
    *device = &devices[index];
    return NVML_SUCCESS;
}

/* ---- identity and memory --------------------------------------------------------------------- */

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
    ENTER();
    return text(device_value(device, "name"), name, length);
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
    ENTER();
    return text(device_value(device, "uuid"), uuid, length);
}

nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_t *pci) {
    const char *bus_id = device_value(device, "bus_id");
    unsigned long long id = 0, subsystem = 0;
    ENTER();
    if (!bus_id) return NVML_ERROR_NOT_SUPPORTED;
    memset(pci, 0, sizeof *pci);
    snprintf(pci->busId, sizeof pci->busId, "%s", bus_id);
    sscanf(bus_id, "%x:%x:%x", &pci->domain, &pci->bus, &pci->device);
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:%02X.0", pci->domain & 0xFFFF, pci->bus,
             pci->device);
    number(device, "pci_device_id", &id); /* a capture with its ids redacted: 0 */
    number(device, "pci_subsystem_id", &subsystem);
    pci->pciDeviceId = (unsigned int)id;
    pci->pciSubSystemId = (unsigned int)subsystem;
    return NVML_SUCCESS;
}

/* v1: used is reserved plus allocated (nvml.h, nvmlMemory_t) */
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory) {
    unsigned long long reserved = 0;
    ENTER();
    number(device, "mem_reserved", &reserved);
    if (number(device, "mem_total", &memory->total) || number(device, "mem_used", &memory->used) ||
        number(device, "mem_free", &memory->free))
        return NVML_ERROR_NOT_SUPPORTED;
    memory->used += reserved;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory) {
    ENTER();
    if (memory->version != nvmlMemory_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if (number(device, "mem_total", &memory->total) || number(device, "mem_reserved", &memory->reserved) ||
        number(device, "mem_used", &memory->used) || number(device, "mem_free", &memory->free))
        return NVML_ERROR_NOT_SUPPORTED;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *utilization) {
    ENTER();
    utilization->memory = 0;
    return uint_value(device, "util_gpu", &utilization->gpu);
}

/* ---- MIG, ECC -------------------------------------------------------------------------------- */

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode, unsigned int *pendingMode) {
    ENTER();
    if (by_name(device, "mig_current", FEATURE, currentMode)) return NVML_ERROR_NOT_SUPPORTED;
    return by_name(device, "mig_pending", FEATURE, pendingMode);
}

nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count) {
    ENTER();
    if (!device_value(device, "mig_current")) return NVML_ERROR_NOT_SUPPORTED;
    *count = MAX_MIG;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index, nvmlDevice_t *migDevice) {
    unsigned int present = 0;
    ENTER();
    if (uint_value(device, "mig_devices", &present)) return NVML_ERROR_NOT_SUPPORTED;
    if (index >= present || index >= MAX_MIG) return NVML_ERROR_NOT_FOUND;
    *migDevice = &migs[device->index][index];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t device, nvmlEnableState_t *current, nvmlEnableState_t *pending) {
    unsigned int cur = 0, pend = 0;
    ENTER();
    if (by_name(device, "ecc_current", FEATURE, &cur) || by_name(device, "ecc_pending", FEATURE, &pend))
        return NVML_ERROR_NOT_SUPPORTED;
    *current = (nvmlEnableState_t)cur;
    *pending = (nvmlEnableState_t)pend;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, nvmlMemoryErrorType_t errorType,
                                         nvmlEccCounterType_t counterType, unsigned long long *eccCounts) {
    char key[48];
    ENTER();
    snprintf(key, sizeof key, "ecc.%s.%s", counterType == NVML_VOLATILE_ECC ? "volatile" : "aggregate",
             errorType == NVML_MEMORY_ERROR_TYPE_CORRECTED ? "corrected" : "uncorrected");
    return number(device, key, eccCounts);
}

nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t device, nvmlEnableState_t *isPending) {
    unsigned int pending = 0;
    ENTER();
    if (by_name(device, "retired_pending", FEATURE, &pending)) return NVML_ERROR_NOT_SUPPORTED;
    *isPending = (nvmlEnableState_t)pending;
    return NVML_SUCCESS;
}

/* the count, and as many page addresses as asked for (made up: only the count is a fact) */
nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t device, nvmlPageRetirementCause_t cause, unsigned int *pageCount,
                                       unsigned long long *addresses) {
    unsigned int n = 0;
    ENTER();
    if (uint_value(device, cause == NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR ? "retired_dbe" : "retired_sbe", &n))
        return NVML_ERROR_NOT_SUPPORTED;
    if (*pageCount < n) {
        *pageCount = n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (unsigned int i = 0; i < n; i++) addresses[i] = 0x1000ULL * (i + 1);
    *pageCount = n;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int *corrRows, unsigned int *uncRows,
                                       unsigned int *isPending, unsigned int *failureOccurred) {
    ENTER();
    if (uint_value(device, "remap_corr", corrRows) || uint_value(device, "remap_unc", uncRows) ||
        by_name(device, "remap_pending", FEATURE, isPending) || by_name(device, "remap_failure", FEATURE, failureOccurred))
        return NVML_ERROR_NOT_SUPPORTED;
    return NVML_SUCCESS;
}

/* ---- PCIe, clocks, power, modes -------------------------------------------------------------- */

#define UINT_QUERY(function, key)                                  \
    nvmlReturn_t function(nvmlDevice_t device, unsigned int *out) { \
        ENTER();                                                   \
        return uint_value(device, key, out);                       \
    }
UINT_QUERY(nvmlDeviceGetCurrPcieLinkGeneration, "pcie_gen")
UINT_QUERY(nvmlDeviceGetMaxPcieLinkGeneration, "pcie_gen_max")
UINT_QUERY(nvmlDeviceGetCurrPcieLinkWidth, "pcie_width")
UINT_QUERY(nvmlDeviceGetMaxPcieLinkWidth, "pcie_width_max")
UINT_QUERY(nvmlDeviceGetEnforcedPowerLimit, "power_limit_mw")
UINT_QUERY(nvmlDeviceGetPowerManagementDefaultLimit, "power_default_mw")

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type, unsigned int *clock) {
    ENTER();
    return type == NVML_CLOCK_SM ? uint_value(device, "sm_clock", clock) : NVML_ERROR_NOT_SUPPORTED;
}

nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, nvmlClockType_t type, unsigned int *clock) {
    ENTER();
    return type == NVML_CLOCK_SM ? uint_value(device, "sm_clock_max", clock) : NVML_ERROR_NOT_SUPPORTED;
}

static nvmlReturn_t clock_reasons(nvmlDevice_t device, unsigned long long *reasons) {
    char list[256], *save = NULL;
    if (!device_value(device, "reasons")) return NVML_ERROR_NOT_SUPPORTED;
    snprintf(list, sizeof list, "%s", device_value(device, "reasons"));
    *reasons = nvmlClocksEventReasonNone;
    for (char *name = strtok_r(list, ",", &save); name; name = strtok_r(NULL, ",", &save))
        for (const struct named *r = REASON; r->name; r++)
            if (strcmp(r->name, name) == 0) *reasons |= r->value;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device, unsigned long long *reasons) {
    ENTER();
    return clock_reasons(device, reasons);
}

/* the name before R535 (deprecated since, still exported) */
nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device, unsigned long long *reasons) {
    ENTER();
    return clock_reasons(device, reasons);
}

nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t device, nvmlComputeMode_t *mode) {
    unsigned int m = 0;
    ENTER();
    if (by_name(device, "compute_mode", COMPUTE_MODE, &m)) return NVML_ERROR_NOT_SUPPORTED;
    *mode = (nvmlComputeMode_t)m;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device, nvmlEnableState_t *mode) {
    unsigned int m = 0;
    ENTER();
    if (by_name(device, "persistence", FEATURE, &m)) return NVML_ERROR_NOT_SUPPORTED;
    *mode = (nvmlEnableState_t)m;
    return NVML_SUCCESS;
}

/* ---- processes ------------------------------------------------------------------------------- */

/* `key` is "PID:BYTES,PID:BYTES" (BYTES "-": not available); the contract of nvml.h: too small an
 * array answers NVML_ERROR_INSUFFICIENT_SIZE with the count needed */
static nvmlReturn_t processes(nvmlDevice_t device, const char *key, unsigned int *count, nvmlProcessInfo_t *infos) {
    char list[512], *save = NULL;
    unsigned int n = 0;
    const char *v = device_value(device, key);
    snprintf(list, sizeof list, "%s", v ? v : "");
    for (char *p = strtok_r(list, ",", &save); p; p = strtok_r(NULL, ",", &save), n++) {
        if (n >= *count || !infos) continue;
        char *colon = strchr(p, ':');
        infos[n].pid = (unsigned int)strtoul(p, NULL, 10);
        infos[n].usedGpuMemory = colon && colon[1] != '-' ? strtoull(colon + 1, NULL, 10) : NVML_VALUE_NOT_AVAILABLE;
        infos[n].gpuInstanceId = infos[n].computeInstanceId = 0xFFFFFFFF;
    }
    nvmlReturn_t rc = n > *count ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS;
    *count = n;
    return rc;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int *infoCount,
                                                  nvmlProcessInfo_t *infos) {
    ENTER();
    return processes(device, "compute", infoCount, infos);
}

nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses(nvmlDevice_t device, unsigned int *infoCount,
                                                   nvmlProcessInfo_t *infos) {
    ENTER();
    return processes(device, "graphics", infoCount, infos);
}

/* ---- NVLink and the NVSwitch fabric ---------------------------------------------------------- */

/* `nvlink` is "1,1,0,...", one state per link; beyond the last link: NVML_ERROR_INVALID_ARGUMENT */
nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link, nvmlEnableState_t *isActive) {
    const char *v = device_value(device, "nvlink");
    ENTER();
    if (!v) return NVML_ERROR_NOT_SUPPORTED;
    if (2 * link >= strlen(v)) return NVML_ERROR_INVALID_ARGUMENT;
    *isActive = v[2 * link] == '1' ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    return NVML_SUCCESS;
}

static nvmlReturn_t fabric(nvmlDevice_t device, unsigned int *state, nvmlReturn_t *status) {
    unsigned int code = 0;
    if (by_name(device, "fabric_state", FABRIC_STATE, state)) return NVML_ERROR_NOT_SUPPORTED;
    uint_value(device, "fabric_status", &code);
    *status = (nvmlReturn_t)code;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuFabricInfo(nvmlDevice_t device, nvmlGpuFabricInfo_t *gpuFabricInfo) {
    unsigned int state = 0;
    ENTER();
    memset(gpuFabricInfo, 0, sizeof *gpuFabricInfo);
    nvmlReturn_t rc = fabric(device, &state, &gpuFabricInfo->status);
    gpuFabricInfo->state = (nvmlGpuFabricState_t)state;
    return rc;
}

/* v3 (the header's nvmlGpuFabricInfoV_t) or v2; `fabric_max_version=2` is a driver before v3 */
nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t device, nvmlGpuFabricInfoV_t *gpuFabricInfo) {
    unsigned int state = 0, version = gpuFabricInfo->version, newest = nvmlGpuFabricInfo_v3;
    ENTER();
    if (device_value(device, "fabric_max_version") && atoi(device_value(device, "fabric_max_version")) == 2)
        newest = nvmlGpuFabricInfo_v2;
    if (version != nvmlGpuFabricInfo_v2 && version != newest) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    nvmlReturn_t rc = fabric(device, &state, &gpuFabricInfo->status);
    gpuFabricInfo->state = (nvmlGpuFabricState_t)state;
    gpuFabricInfo->cliqueId = 0;
    gpuFabricInfo->healthMask = 0;
    if (version == nvmlGpuFabricInfo_v3) gpuFabricInfo->healthSummary = NVML_GPU_FABRIC_HEALTH_SUMMARY_NOT_SUPPORTED;
    return rc;
}
