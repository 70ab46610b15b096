"""`python -m bot.files_server`: the command line `launch_args` builds."""

from bot.files_server.server import main

main()
