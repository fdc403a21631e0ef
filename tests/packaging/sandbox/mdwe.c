// Runs a program with the kernel's MemoryDenyWriteExecute (prctl PR_SET_MDWE, Linux >= 6.3):
// no mapping may become writable+executable or gain PROT_EXEC later, as systemd's
// MemoryDenyWriteExecute=yes enforces (by seccomp in systemd 252, by this prctl in newer ones).
#include <stdio.h>
#include <sys/prctl.h>
#include <unistd.h>
int main(int argc, char** argv) {
  if (prctl(65 /*PR_SET_MDWE*/, 1 /*PR_MDWE_REFUSE_EXEC_GAIN*/, 0, 0, 0) != 0) { perror("PR_SET_MDWE"); return 125; }
  execv(argv[1], argv + 1); perror("execv"); return 126;
}
