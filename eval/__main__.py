import faulthandler
import signal
import sys

from eval.cli import main

# A run that seems hung says where it is: `kill -USR1 PID` prints every thread's stack to stderr.
if sys.platform != "win32":
    faulthandler.register(signal.SIGUSR1, all_threads=True)
sys.exit(main())
