"""Ways a command might reach past its environment into this host, shared
by the tests of the backends whose workspace is a directory of this host
(test_host_side for local, test_singularity_attacks for singularity).
Each returns what it found, and the test decides what must hold.
"""

import os
import socket

from sgclient import shell_quote


def setuid_leftovers(gw):
    """Try to leave a setuid or setgid file in the workspace.

    chmod u+s and 2755 on a file, and a file created with mode 06755, from
    bash in `unconfined` and `standard` mode and from an `unconfined`
    background process.  Returns [(name, mode)] of the workspace files that
    hold either bit afterwards (empty when nothing got through), read with
    stat(1) in the environment.
    """
    gw.write("prog", "#!/bin/sh\n")
    create = ("import os, sys; os.close(os.open(sys.argv[1], "
              "os.O_CREAT | os.O_WRONLY, 0o6755))")
    for mode in ("unconfined", "standard"):
        for command in ("chmod u+s prog", "chmod 2755 prog",
                        "python3 -c %s made-%s" % (shell_quote(create), mode)):
            gw.sh(command, mode)
    pid = gw.start("chmod 4755 prog; install -m 4755 /dev/null made-bg",
                   mode="unconfined")["id"]
    gw.wait_ended(pid)
    found = []
    for name in ("prog", "made-unconfined", "made-standard", "made-bg"):
        st = gw.sh("stat -c %%a %s" % name)
        if st["exit_code"] == 0 and int(st["output"].strip(), 8) & 0o6000:
            found.append((name, st["output"].strip()))
    return found


def abstract_socket_probe(test):
    """An abstract unix socket a process of this host listens on, and a
    shell command that tries to connect to it: it prints `connected` or
    `refused ERRNO`.  The socket closes at the test's cleanup."""
    name = "sg-e2e-abstract-%d-%s" % (os.getpid(), test.id().rsplit(".", 1)[-1][-40:])
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    test.addCleanup(srv.close)
    srv.bind("\0" + name)
    srv.listen(8)
    return "python3 -c " + shell_quote(
        "import socket\n"
        "s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
        "try:\n"
        "    s.connect('\\0%s'); print('connected')\n"
        "except OSError as e:\n"
        "    print('refused', e.errno)\n" % name)
