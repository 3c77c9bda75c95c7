"""I/O ops: Save/Load/Checkpoint over the DB registry, DB readers.

Each import below registers its module's ops; keep one line per module.
"""

from framework.ops.io import (  # noqa: F401
    dataset_ops,
    dataset_records,
    db_input,
    image_input,
    load_save,
    queue_ops,
    rebatching_queue,
    text_file_reader,
)
