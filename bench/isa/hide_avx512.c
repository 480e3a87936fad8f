/* Hides AVX-512 from the CPUID instruction of the process it is preloaded into, so that a
 * library which picks its kernels by CPUID (onnxruntime's MLAS, OpenBLAS without
 * OPENBLAS_CORETYPE) runs its AVX2 kernels on an AVX-512 machine. Benchmarks use it to compare
 * Kiln's AVX2 code with a peer's AVX2 code on the same core.
 *
 * Linux's CPUID faulting (arch_prctl ARCH_SET_CPUID, 0) makes every CPUID raise SIGSEGV; the
 * handler runs the real instruction with faulting lifted for a moment, clears the AVX-512 bits
 * of leaf 7 and steps over the instruction. The setting is per thread and inherited by threads
 * and children made later. Where the kernel or CPU lacks CPUID faulting, the library prints why
 * and the process runs unchanged, with the variable KILN_HIDE_AVX512_FAILED set to the reason.
 *
 * Build: cc -O2 -shared -fPIC -o hide_avx512.so hide_avx512.c
 * Use:   LD_PRELOAD=./hide_avx512.so python ...
 */
#define _GNU_SOURCE
#include <asm/prctl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

static int set_cpuid_faulting(int on) {
    /* ARCH_SET_CPUID takes 1 to allow CPUID and 0 to make it fault. */
    return (int)syscall(SYS_arch_prctl, ARCH_SET_CPUID, on ? 0 : 1);
}

static void real_cpuid(uint32_t leaf, uint32_t sub, uint32_t r[4]) {
    __asm__ volatile("cpuid" : "=a"(r[0]), "=b"(r[1]), "=c"(r[2]), "=d"(r[3]) : "a"(leaf), "c"(sub));
}

/* Leaf 7 subleaf 0: EBX AVX512F(16) DQ(17) IFMA(21) PF(26) ER(27) CD(28) BW(30) VL(31);
 * ECX VBMI(1) VBMI2(6) VNNI(11) BITALG(12) VPOPCNTDQ(14); EDX 4VNNIW(2) 4FMAPS(3)
 * VP2INTERSECT(8) FP16(23). Subleaf 1: EAX AVX512_BF16(5). */
#define EBX_AVX512 ((1u << 16) | (1u << 17) | (1u << 21) | (1u << 26) | (1u << 27) | (1u << 28) | (1u << 30) | (1u << 31))
#define ECX_AVX512 ((1u << 1) | (1u << 6) | (1u << 11) | (1u << 12) | (1u << 14))
#define EDX_AVX512 ((1u << 2) | (1u << 3) | (1u << 8) | (1u << 23))

static void on_sigsegv(int sig, siginfo_t *info, void *ctx_) {
    ucontext_t *ctx = (ucontext_t *)ctx_;
    greg_t *g = ctx->uc_mcontext.gregs;
    const unsigned char *ip = (const unsigned char *)g[REG_RIP];
    (void)info;
    if (ip[0] != 0x0f || ip[1] != 0xa2) {
        /* A real fault: restore the default action and let it happen again. */
        signal(sig, SIG_DFL);
        return;
    }
    uint32_t leaf = (uint32_t)g[REG_RAX], sub = (uint32_t)g[REG_RCX], r[4];
    set_cpuid_faulting(0);
    real_cpuid(leaf, sub, r);
    set_cpuid_faulting(1);
    if (leaf == 7 && sub == 0) {
        r[1] &= ~EBX_AVX512;
        r[2] &= ~ECX_AVX512;
        r[3] &= ~EDX_AVX512;
    } else if (leaf == 7 && sub == 1) {
        r[0] &= ~(1u << 5);
    }
    g[REG_RAX] = r[0];
    g[REG_RBX] = r[1];
    g[REG_RCX] = r[2];
    g[REG_RDX] = r[3];
    g[REG_RIP] += 2;
}

__attribute__((constructor)) static void hide_avx512(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigsegv;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSEGV, &sa, NULL) != 0 || set_cpuid_faulting(1) != 0) {
        fprintf(stderr, "hide_avx512: CPUID faulting is not available here; AVX-512 stays visible\n");
        setenv("KILN_HIDE_AVX512_FAILED", "no CPUID faulting", 1);
    }
}
