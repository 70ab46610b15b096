"""`python -m tools.files`: the command line `launch_args` builds."""

from tools.files.server import main

main()
