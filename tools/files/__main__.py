"""`python -m pizzabot.tools.files`: the command line `launch_args` builds."""

from pizzabot.tools.files.server import main

main()
