from rationale_cli.cli import main

if __name__ == "__main__":  # not when a worker process (--workers) imports this module
    main()
