from fixture_store.cli import main

main()
