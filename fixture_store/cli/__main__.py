from fixture_store.cli.app import main

main()
