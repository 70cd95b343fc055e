"""The command line of ``python -m minigrad.bench`` (and the ``minigrad-bench`` script)."""
import argparse
import sys

from minigrad.bench import kernels, overflow

COMMANDS = {"overflow": overflow, "kernels": kernels}


def main(argv=None):
    """Parse ``argv`` (default ``sys.argv[1:]``), run the command, exit with its code."""
    parser = argparse.ArgumentParser(prog="python -m minigrad.bench",
                                     description="minigrad's benchmark tools")
    commands = parser.add_subparsers(dest="command", required=True)
    for name, module in COMMANDS.items():
        doc = module.__doc__.strip()
        sub = commands.add_parser(name, help=doc.splitlines()[0], description=doc,
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
        module.add_arguments(sub)
    args = parser.parse_args(argv)
    try:
        code = COMMANDS[args.command].run(args)
    except ValueError as error:  # a size, list or other value the parser could not check
        parser.error(str(error))
    sys.exit(code)
