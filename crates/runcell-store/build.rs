fn main() {
    // The migrations are embedded by sqlx::migrate!; rebuild when they change.
    println!("cargo:rerun-if-changed=migrations");
    println!("cargo:rerun-if-changed=migrations_postgres");
}
