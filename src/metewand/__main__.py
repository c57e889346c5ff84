from metewand.cli.main import main

main()
