/* cpu_settings.c: the CPU backend's rows of the configuration table (core/settings.h). */
#include <stddef.h>

#include "backend.h"

segops_cpu_conf_t segops_cpu_conf = {.threads = 0, .isa = SEGOPS_CPU_ISA_AUTO}; /* the defaults below */

static const segops_setting ROWS[] = {
    {.name = "threads",
     .env = "SEGOPS_THREADS",
     .type = SEGOPS_SET_INT,
     .offset = offsetof(segops_cpu_conf_t, threads),
     .lo = 0,
     .hi = 4096,
     .def = "0",
     .help = "CPU backend compute threads, and the HTTP pool's size unless --http-threads says otherwise "
             "(0 = the online CPUs)"},
    /* The bits are the same either way (tests/core/test_cpu_isa.c compares the two tables through this row). */
    {.name = "cpu-isa",
     .env = "SEGOPS_CPU_ISA",
     .type = SEGOPS_SET_ENUM,
     .offset = offsetof(segops_cpu_conf_t, isa),
     .choices = "auto|baseline",
     .def = "auto",
     .help = "the CPU functions' instruction set: auto = x86-64-v3 (AVX2) where the CPU has it, else the baseline; "
             "baseline forces the baseline (same results, slower)"},
};

segops_settings_group segops_cpu_settings = {"CPU backend", NULL, ROWS, sizeof ROWS / sizeof ROWS[0], &segops_cpu_conf};
