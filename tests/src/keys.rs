//! Signing keys for the tests that serve behind bearer-token auth: an Ed25519 key made from a
//! random seed, its JWKS file, and the tokens it signs.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::Failure;

/// An Ed25519 signing key made from a random seed, with the key id its tokens and its JWK carry.
pub struct SigningKey {
    /// The private key.
    pub key: jsonwebtoken::EncodingKey,
    /// The key id (`kid`).
    pub kid: String,
}

impl SigningKey {
    /// A fresh key with the key id `kid`.
    pub fn generate(kid: &str) -> Self {
        // 32 bytes from two random UUIDs (a few fixed version bits do not matter in a test).
        let mut seed = Vec::with_capacity(32);
        seed.extend_from_slice(uuid::Uuid::new_v4().as_bytes());
        seed.extend_from_slice(uuid::Uuid::new_v4().as_bytes());
        // PKCS#8 v1 wrapping of an Ed25519 private key: this header, then the 32-byte seed.
        let mut der = vec![
            0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22,
            0x04, 0x20,
        ];
        der.extend_from_slice(&seed);
        Self {
            key: jsonwebtoken::EncodingKey::from_ed_der(&der),
            kid: kid.to_owned(),
        }
    }

    /// The public JWK, with `kid` and `alg: EdDSA`.
    pub fn public_jwk(&self) -> Result<jsonwebtoken::jwk::Jwk, Failure> {
        let mut jwk =
            jsonwebtoken::jwk::Jwk::from_encoding_key(&self.key, jsonwebtoken::Algorithm::EdDSA)?;
        jwk.common.key_id = Some(self.kid.clone());
        Ok(jwk)
    }

    /// Writes a JWKS file holding this key's public JWK into `dir` and returns its path.
    pub fn write_jwks(&self, dir: &Path) -> Result<PathBuf, Failure> {
        let path = dir.join("jwks.json");
        std::fs::write(
            &path,
            serde_json::to_vec(&json!({"keys": [self.public_jwk()?]}))?,
        )?;
        Ok(path)
    }

    /// `claims` signed with EdDSA, with this key's `kid` in the header.
    pub fn sign(&self, claims: &Value) -> Result<String, Failure> {
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::EdDSA);
        header.kid = Some(self.kid.clone());
        Ok(jsonwebtoken::encode(&header, claims, &self.key)?)
    }
}
