from metewand.cli.entry import main

main()
