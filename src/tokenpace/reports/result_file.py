# compatibility: moved to tokenpace.results
from tokenpace.results.document import (SCHEMA_VERSION, load_document, result_document,  # noqa: F401
                                        write_result)
