"""`python -m euler_client …` runs the `euler` command."""

from euler_client.cli import main

main()
