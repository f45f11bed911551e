"""Reference solutions to the course exercises, kept out of the shipped package.

Plain modules: the notebook tests paste or import them in place of the students' answers.
"""
