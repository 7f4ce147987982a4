package upstream

import (
	"os/exec"
	"syscall"
)

// endWithParent asks the kernel to send the child SIGTERM if stategate dies without
// ending it (SIGKILL, a crash): no orphaned server keeps running.
func endWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
