"""The Python run inside a docker sandbox's container (`python -I -c SCRIPT`): its idle PID 1, the kill of
every sample process, the clean-up after a sample, file writes and reads through exec (the archive API cannot
see tmpfs mounts)."""

SCRATCH = "/scratch"                      # a tmpfs: the samples' copies and the workers' folders
HARNESS = f"{SCRATCH}/.coderun-harness"  # coderun's files, spared by the clean-up
# The sample user's home (images/base.Dockerfile): a tmpfs, emptied after each sample like /tmp. Tools that
# find a home from the user database, not $HOME (ansible's ~/.ansible/tmp), write there.
USER_HOME = "/home/coderun"

# PID 1: reaps orphans as soon as they end (SIGCHLD wakes it), so their pids return to the limit at once;
# exits (and so ends the container) when its stdin, held by the owning coderun process, reaches EOF.
REAPER = ("import os, signal, threading\n"
           "signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGCHLD])\n"
           "def owner():\n"
           "    while os.read(0, 65536):\n"
           "        pass\n"
           "    os._exit(0)\n"
           "threading.Thread(target=owner, daemon=True).start()\n"
           "while True:\n"
           "    try:\n"
           "        os.wait()\n"
           "    except ChildProcessError:\n"
           "        signal.sigtimedwait([signal.SIGCHLD], 1)\n")
KILL_ALL = ("import os, signal\n"
             "try:\n"
             "    os.kill(-1, signal.SIGKILL)\n"
             "except OSError:\n"
             "    pass\n")
CLEAN = ("import os, shutil, signal, stat, sys\n"
          "try:\n"
          "    os.kill(-1, signal.SIGKILL)\n"
          "except OSError:\n"
          "    pass\n"
          "keep = set(sys.argv[1:])\n"
          "def fix(func, path, exc):\n"
          "    try:\n"
          "        os.chmod(os.path.dirname(path), stat.S_IRWXU); os.chmod(path, stat.S_IRWXU); func(path)\n"
          "    except OSError:\n"
          "        pass\n"
          "for top in ('/tmp', '/dev/shm', '/scratch', '" + USER_HOME + "'):\n"
          "    for name in os.listdir(top):\n"
          "        p = os.path.join(top, name)\n"
          "        if p in keep or p == '" + HARNESS + "':\n"
          "            continue\n"
          "        if os.path.isdir(p) and not os.path.islink(p):\n"
          "            shutil.rmtree(p, onerror=fix)\n"
          "        else:\n"
          "            try:\n"
          "                os.unlink(p)\n"
          "            except OSError:\n"
          "                pass\n")
WRITE = ("import base64, os, sys\n"
          "os.makedirs(os.path.dirname(sys.argv[1]), exist_ok=True)\n"
          "with open(sys.argv[1], sys.argv[2]) as f:\n"
          "    f.write(base64.b64decode(sys.argv[3]))\n")
WRITE_MANY = ("import base64, os, sys\n"
               "for path, data in zip(sys.argv[1::2], sys.argv[2::2]):\n"
               "    os.makedirs(os.path.dirname(path), exist_ok=True)\n"
               "    with open(path, 'wb') as f:\n"
               "        f.write(base64.b64decode(data))\n")
READ = ("import os, stat, sys\n"
         "try:\n"
         "    fd = os.open(sys.argv[1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)\n"
         "except OSError as e:\n"
         "    sys.stderr.write(str(e)); sys.exit(2)\n"
         "if not stat.S_ISREG(os.fstat(fd).st_mode):\n"
         "    sys.stderr.write('not a regular file'); sys.exit(2)\n"
         "with os.fdopen(fd, 'rb') as f:\n"
         "    sys.stdout.buffer.write(f.read(int(sys.argv[2])))\n")
