# tinygpt app in a container: one Streamlit process per container.
# For a whole class, run several containers (or deploy/run_cluster.sh on one machine) behind
# nginx with sticky sessions (deploy/nginx.conf). Everything is installed at build time;
# the running container fetches nothing from the network.
#
#   docker build -t tinygpt .
#   docker run --rm -p 8501:8501 tinygpt          # then open http://localhost:8501
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    OPENBLAS_NUM_THREADS=1 \
    OMP_NUM_THREADS=1 \
    MALLOC_ARENA_MAX=2 \
    TINYGPT_MODELS_DIR=/app/models \
    STREAMLIT_BROWSER_GATHER_USAGE_STATS=false \
    STREAMLIT_SERVER_HEADLESS=true

WORKDIR /app

# dependencies first: this layer is reused while only the app changes
COPY requirements.txt ./
RUN pip install --no-cache-dir -r requirements.txt

COPY .streamlit/ .streamlit/
COPY tinygpt/ tinygpt/
COPY tinygpt_app/ tinygpt_app/
COPY tinygpt_hosting/ tinygpt_hosting/
COPY data/ data/
COPY models/ models/
COPY pages/ pages/
COPY app.py ./

# not root: a plain user without a login shell; the app only reads its files
RUN useradd --create-home --uid 10001 --shell /usr/sbin/nologin tinygpt
USER tinygpt

EXPOSE 8501

# slim images have no curl: ask the health endpoint with Python's standard library (loopback)
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8501/_stcore/health', timeout=4)"]

# tinygpt_app.launch: `streamlit run app.py` with the session door in place before the first
# request (docs/class_limits.md)
CMD ["python", "-m", "tinygpt_app.launch", "--server.address=0.0.0.0", "--server.port=8501", \
     "--server.headless=true", "--browser.gatherUsageStats=false"]
