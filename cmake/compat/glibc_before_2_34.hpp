// Force-included into the agent's sources by the portable build (cmake/DdprunPackage.cmake),
// which compiles against glibc 2.28: the declarations of the glibc wrappers the tree calls that
// glibc added later. Each is the bare system call, which is all glibc's own wrapper is, so the
// behaviour is the same (-1 and ENOSYS on a kernel without the call). On glibc >= 2.34 this
// header declares nothing.
#pragma once

#include <features.h>

#if defined(__GLIBC__) && (__GLIBC__ == 2 && __GLIBC_MINOR__ < 34)
#include <sys/syscall.h>
#include <unistd.h>

// glibc 2.34; Linux 5.9.
inline int close_range(unsigned int first, unsigned int last, int flags) {
  return static_cast<int>(::syscall(SYS_close_range, first, last, flags));
}
#endif
