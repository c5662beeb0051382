"""What the pages teach, without streamlit: the lab's and Theory's numbers, the Lossless experiment, the guided
experiments, why a run was slow, the recorded results and the example prompts.
May import: specviz.runs and everything below it.
"""
