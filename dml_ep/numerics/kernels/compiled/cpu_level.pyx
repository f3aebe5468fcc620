"""Which x86-64 level the running CPU supports, from its own CPUID (the compiler's runtime
check, which also asks whether the OS saves the wider registers): /proc/cpuinfo can describe
another CPU than the one executing (an emulator's host), where a wider build would fault."""

cdef extern from *:
    """
    static int dml_ep_x86_64_level(void) {
    #if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
        __builtin_cpu_init();
        int v3 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi")
                 && __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("f16c") && __builtin_cpu_supports("movbe");
        int v4 = v3 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512cd")
                 && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
        return v4 ? 4 : v3 ? 3 : 1;
    #else
        return 1;
    #endif
    }
    """
    int dml_ep_x86_64_level()


def x86_64_level() -> int:
    """4 (AVX-512), 3 (AVX2, FMA) or 1: the baseline, also on other CPUs and compilers."""
    return dml_ep_x86_64_level()
