"""I/O ops: Save/Load/Checkpoint over the DB registry, DB readers.

``MODULES`` names every module that registers ops, one line each; ``framework.ops.families`` imports
them one by one as their op types are first looked up (importing this package registers nothing).
"""

MODULES = (
    "dataset_ops",
    "dataset_records",
    "db_input",
    "image_input",
    "load_save",
    "queue_ops",
    "rebatching_queue",
    "text_file_reader",
)
