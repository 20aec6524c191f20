"""The one exception type for problems a user can fix (bad config, bad input file, missing model).

Its message must name the file, key or model at fault and say how to fix it; the pipeline prints it as the
job's error instead of a traceback from deep inside a library.
"""


class InputError(Exception):
    """Bad user input: a config value, a dataset file or a model reference that cannot be used as given."""
