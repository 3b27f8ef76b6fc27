from rationale_cli.cli import main

main()
