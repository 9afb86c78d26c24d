"""The `kai` command line: a thin presentation layer over the library."""
