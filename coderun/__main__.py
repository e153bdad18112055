from coderun.cli.main import main

main()
