"""The `kai` command line: a thin presentation layer over the library."""

# `-h` as well as `--help`, on the group and on each command (a command run on its own, as
# `kai demo` runs `kai sim`, does not inherit the group's settings)
CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"]}
