import os

# numpy's BLAS would otherwise start a thread per core for every matrix product (the report's
# bootstrap): in a web or Celery worker process those threads fight the other workers for the
# same cores and make the report slower, not faster. Set before anything imports numpy.
for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

from config.celery import app as celery_app  # noqa: E402

__all__ = ["celery_app"]
