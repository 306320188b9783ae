//! DYNAFOLD_* settings: each read once, validated strictly; a bad value gets one warning line
//! and the default.
