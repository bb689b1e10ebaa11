import streamlit as st

st.title("tinygpt")
st.write("A GPT written from scratch in NumPy. The pages arrive with the app issues.")
