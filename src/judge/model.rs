/*!
A model of the arm64/x86 PMU driver that generates observation streams with
their ground truth (being written).
*/
