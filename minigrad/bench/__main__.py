from minigrad.bench.cli import main

main()
